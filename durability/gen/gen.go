// Package gen is the durability compiler (the Grid Services thesis IV.C.4), which the seed
// never built: it reads a service's state-object types and its service
// type from Go source (go/parser, go/ast), checks a durability mapping
// against them, and emits plain Go in the same package: for each state
// object an interface of its methods (what the service calls), its
// metadata (durability.ObjectInfo), a typed proxy that records every
// update method call through the generic durability.Proxy, and for the
// service a constructor that wires the proxies in (the seed's "method
// calls to the state objects are replaced with calls to the corresponding
// durability proxy") and a wrapper that brackets every service method with
// startA and commitA.
//
// Rules the generator enforces (decisions, recorded in the durability
// package doc): an exported method that returns nothing is an update
// method and takes only named int, float, string, []byte or bool
// parameters; a method that returns something is a read and must not
// change the object; the service reaches each state object through a
// field of the generated interface type <Object>API.
package gen

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synod-dev/synod/durability"
)

// Options say what to generate.
type Options struct {
	// Dir is the package directory holding the types.
	Dir string
	// Objects are the state-object type names.
	Objects []string
	// Service is the service type (optional): a struct whose fields have
	// the objects' <Object>API types.
	Service string
	// Mapping, when set, is validated against the objects.
	Mapping *durability.Mapping
	// Output is the generated file's base name (skipped when reading).
	Output string
}

// DefaultOutput is the generated file's name.
const DefaultOutput = "durable_gen.go"

type method struct {
	name    string
	params  []param
	results string // printed result list ("" for none)
	update  bool
	variad  bool
}

type param struct {
	name string
	typ  string
	kind durability.Kind
}

type object struct {
	name    string
	methods []method
}

type svcMethod struct {
	name    string
	params  string // printed
	args    string // call arguments
	results []string
}

// Generate returns the generated source.
func Generate(o Options) ([]byte, error) {
	if o.Output == "" {
		o.Output = DefaultOutput
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, o.Dir, func(fi os.FileInfo) bool {
		n := fi.Name()
		return !strings.HasSuffix(n, "_test.go") && n != o.Output
	}, 0)
	if err != nil {
		return nil, err
	}
	if len(pkgs) != 1 {
		return nil, fmt.Errorf("%s: want one package, found %d", o.Dir, len(pkgs))
	}
	var pkg *ast.Package
	for _, p := range pkgs {
		pkg = p
	}
	types := map[string]*ast.TypeSpec{}
	methods := map[string][]*ast.FuncDecl{}
	var files []string
	for name := range pkg.Files {
		files = append(files, name)
	}
	sort.Strings(files)
	for _, fn := range files {
		for _, d := range pkg.Files[fn].Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						types[ts.Name.Name] = ts
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 || !d.Name.IsExported() {
					continue
				}
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if id, ok := t.(*ast.Ident); ok {
					methods[id.Name] = append(methods[id.Name], d)
				}
			}
		}
	}
	pr := func(e ast.Node) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, e)
		return b.String()
	}
	var objs []object
	var infos []durability.ObjectInfo
	for _, name := range o.Objects {
		if _, ok := types[name]; !ok {
			return nil, fmt.Errorf("%s: no type %s", o.Dir, name)
		}
		ob := object{name: name}
		info := durability.ObjectInfo{Name: name}
		ms := methods[name]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name.Name < ms[j].Name.Name })
		for _, fd := range ms {
			m := method{name: fd.Name.Name, update: fd.Type.Results == nil || len(fd.Type.Results.List) == 0}
			if !m.update {
				var rs []string
				for _, f := range fd.Type.Results.List {
					n := len(f.Names)
					if n == 0 {
						n = 1
					}
					for i := 0; i < n; i++ {
						rs = append(rs, pr(f.Type))
					}
				}
				m.results = strings.Join(rs, ", ")
				if len(rs) > 1 {
					m.results = "(" + m.results + ")"
				}
			}
			mi := durability.MethodInfo{Name: m.name}
			for i, f := range fd.Type.Params.List {
				typ := pr(f.Type)
				if _, ok := f.Type.(*ast.Ellipsis); ok {
					m.variad = true
				}
				names := f.Names
				if len(names) == 0 {
					if m.update {
						return nil, fmt.Errorf("%s.%s: parameter %d has no name (update methods name their arguments: the mapping's SQL uses them)", name, m.name, i)
					}
					names = []*ast.Ident{ast.NewIdent(fmt.Sprintf("a%d", len(m.params)))}
				}
				for _, n := range names {
					p := param{name: n.Name, typ: typ}
					if m.update {
						k, ok := kindOf(typ)
						if !ok {
							return nil, fmt.Errorf("%s.%s: parameter %s has type %s; update methods take int, float, string, []byte or bool kinds", name, m.name, n.Name, typ)
						}
						p.kind = k
						mi.Params = append(mi.Params, durability.Param{Name: n.Name, Kind: k})
					}
					m.params = append(m.params, p)
				}
			}
			if m.update {
				info.Updates = append(info.Updates, mi)
			} else {
				info.Reads = append(info.Reads, m.name)
			}
			ob.methods = append(ob.methods, m)
		}
		objs = append(objs, ob)
		infos = append(infos, info)
	}
	if o.Mapping != nil {
		if err := o.Mapping.Validate(infos); err != nil {
			return nil, fmt.Errorf("mapping: %w", err)
		}
	}
	var svcFields [][2]string // field, object
	var svcMethods []svcMethod
	if o.Service != "" {
		ts, ok := types[o.Service]
		if !ok {
			return nil, fmt.Errorf("%s: no service type %s", o.Dir, o.Service)
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return nil, fmt.Errorf("%s: service type %s is not a struct", o.Dir, o.Service)
		}
		used := map[string]string{}
		for _, f := range st.Fields.List {
			id, ok := f.Type.(*ast.Ident)
			if !ok || !strings.HasSuffix(id.Name, "API") {
				continue
			}
			obj := strings.TrimSuffix(id.Name, "API")
			if !contains(o.Objects, obj) {
				continue
			}
			for _, n := range f.Names {
				if prev, dup := used[obj]; dup {
					return nil, fmt.Errorf("%s: fields %s and %s both hold a %s; a state object is one field (mapping entries are per object)", o.Service, prev, n.Name, obj)
				}
				used[obj] = n.Name
				svcFields = append(svcFields, [2]string{n.Name, obj})
			}
		}
		for _, obj := range o.Objects {
			if _, ok := used[obj]; !ok {
				return nil, fmt.Errorf("%s: no field of type %sAPI", o.Service, obj)
			}
		}
		ms := methods[o.Service]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name.Name < ms[j].Name.Name })
		for _, fd := range ms {
			sm := svcMethod{name: fd.Name.Name}
			var ps, as []string
			for _, f := range fd.Type.Params.List {
				typ := pr(f.Type)
				names := f.Names
				if len(names) == 0 {
					names = []*ast.Ident{ast.NewIdent(fmt.Sprintf("a%d", len(as)))}
				}
				for _, n := range names {
					ps = append(ps, n.Name+" "+typ)
					a := n.Name
					if _, ok := f.Type.(*ast.Ellipsis); ok {
						a += "..."
					}
					as = append(as, a)
				}
			}
			sm.params, sm.args = strings.Join(ps, ", "), strings.Join(as, ", ")
			if fd.Type.Results != nil {
				for _, f := range fd.Type.Results.List {
					n := len(f.Names)
					if n == 0 {
						n = 1
					}
					for i := 0; i < n; i++ {
						sm.results = append(sm.results, pr(f.Type))
					}
				}
			}
			svcMethods = append(svcMethods, sm)
		}
	}
	var b bytes.Buffer
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	w("// Code generated by synod-lab durability gen; DO NOT EDIT.\n")
	w("// Objects: %s", strings.Join(o.Objects, ", "))
	if o.Service != "" {
		w("; service: %s", o.Service)
	}
	w(".\n\npackage %s\n\n", pkg.Name)
	w("import (\n\t\"encoding/json\"\n\t\"fmt\"\n\n\t\"github.com/synod-dev/synod/durability\"\n)\n\n")
	for i, ob := range objs {
		emitObject(w, ob, infos[i])
	}
	if o.Service != "" {
		emitService(w, o.Service, svcFields, svcMethods)
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated code does not format: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

// WriteFile generates and writes Dir/Output.
func WriteFile(o Options) (string, error) {
	src, err := Generate(o)
	if err != nil {
		return "", err
	}
	if o.Output == "" {
		o.Output = DefaultOutput
	}
	path := filepath.Join(o.Dir, o.Output)
	return path, os.WriteFile(path, src, 0o644)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func kindOf(typ string) (durability.Kind, bool) {
	switch typ {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32":
		return durability.KindInt, true
	case "float32", "float64":
		return durability.KindFloat, true
	case "string":
		return durability.KindString, true
	case "[]byte":
		return durability.KindBytes, true
	case "bool":
		return durability.KindBool, true
	}
	return "", false
}

// toValue converts a typed argument to a durability.Value.
func toValue(p param) string {
	switch p.kind {
	case durability.KindInt:
		if p.typ == "int64" {
			return p.name
		}
		return "int64(" + p.name + ")"
	case durability.KindFloat:
		if p.typ == "float64" {
			return p.name
		}
		return "float64(" + p.name + ")"
	}
	return p.name
}

var asFunc = map[durability.Kind]string{
	durability.KindInt:    "AsInt64",
	durability.KindFloat:  "AsFloat64",
	durability.KindString: "AsString",
	durability.KindBytes:  "AsBytes",
	durability.KindBool:   "AsBool",
}

func emitObject(w func(string, ...any), ob object, info durability.ObjectInfo) {
	n := ob.name
	sig := func(m method) string {
		var ps []string
		for _, p := range m.params {
			ps = append(ps, p.name+" "+p.typ)
		}
		s := m.name + "(" + strings.Join(ps, ", ") + ")"
		if m.results != "" {
			s += " " + m.results
		}
		return s
	}
	call := func(m method) string {
		var as []string
		for _, p := range m.params {
			a := p.name
			if strings.HasPrefix(p.typ, "...") {
				a += "..."
			}
			as = append(as, a)
		}
		return m.name + "(" + strings.Join(as, ", ") + ")"
	}
	w("// %sAPI is what the service calls on a %s: the object itself (the\n// original service) or its durability proxy.\ntype %sAPI interface {\n", n, n, n)
	for _, m := range ob.methods {
		w("\t%s\n", sig(m))
	}
	w("}\n\nvar _ %sAPI = (*%s)(nil)\nvar _ %sAPI = (*%sProxy)(nil)\n\n", n, n, n, n)
	w("// %sInfo describes %s's update methods and reads for mapping validation.\n", n, n)
	w("var %sInfo = durability.ObjectInfo{\n\tName: %q,\n\tUpdates: []durability.MethodInfo{\n", n, n)
	for _, mi := range info.Updates {
		w("\t\t{Name: %q, Params: []durability.Param{", mi.Name)
		for i, p := range mi.Params {
			if i > 0 {
				w(", ")
			}
			w("{Name: %q, Kind: %q}", p.Name, p.Kind)
		}
		w("}},\n")
	}
	w("\t},\n\tReads: %#v,\n}\n\n", info.Reads)
	w("// %sProxy is a %s behind the durability proxy its mapping entry chooses:\n// update methods pass through Invoke, reads go straight to the object.\n", n, n)
	w("type %sProxy struct {\n\tobj *%s\n\tp   durability.Proxy\n}\n\n", n, n)
	w("// New%sProxy wraps obj with the proxy m describes (validate the mapping\n// against %sInfo first).\n", n, n)
	w("func New%sProxy(obj *%s, m *durability.ObjectMapping) (*%sProxy, error) {\n", n, n, n)
	w("\tx := &%sProxy{obj: obj}\n", n)
	w("\tp, err := durability.NewProxy(%sInfo, m, durability.Hooks{\n", n)
	w("\t\tReplay: x.replay,\n\t\tReset:  func() { *obj = %s{} },\n", n)
	w("\t\tSave:   func() ([]byte, error) { return json.Marshal(obj) },\n")
	w("\t\tLoad: func(b []byte) error {\n\t\t\tvar v %s\n\t\t\tif err := json.Unmarshal(b, &v); err != nil {\n\t\t\t\treturn err\n\t\t\t}\n\t\t\t*obj = v\n\t\t\treturn nil\n\t\t},\n\t})\n", n)
	w("\tif err != nil {\n\t\treturn nil, err\n\t}\n\tx.p = p\n\treturn x, nil\n}\n\n")
	w("// Durability returns the generic proxy (init, recover, the action-control methods).\nfunc (x *%sProxy) Durability() durability.Proxy { return x.p }\n\n", n)
	w("// Object returns the wrapped object.\nfunc (x *%sProxy) Object() *%s { return x.obj }\n\n", n, n)
	for _, m := range ob.methods {
		if !m.update {
			w("// %s is a read.\nfunc (x *%sProxy) %s {\n\treturn x.obj.%s\n}\n\n", m.name, n, sig(m), call(m))
			continue
		}
		var vs []string
		for _, p := range m.params {
			vs = append(vs, toValue(p))
		}
		w("// %s is an update: invoke.\nfunc (x *%sProxy) %s {\n", m.name, n, sig(m))
		w("\tx.p.Invoke(%q, []durability.Value{%s}, func() { x.obj.%s })\n}\n\n", m.name, strings.Join(vs, ", "), call(m))
	}
	w("// replay runs an update method from its recorded or recovered arguments.\n")
	w("func (x *%sProxy) replay(method string, args []durability.Value) error {\n\tswitch method {\n", n)
	for _, m := range ob.methods {
		if !m.update {
			continue
		}
		w("\tcase %q:\n", m.name)
		w("\t\tif len(args) != %d {\n\t\t\treturn fmt.Errorf(\"%s.%s takes %d arguments, got %%d\", len(args))\n\t\t}\n", len(m.params), n, m.name, len(m.params))
		var as []string
		for i, p := range m.params {
			w("\t\ta%d, err := durability.%s(args[%d])\n\t\tif err != nil {\n\t\t\treturn fmt.Errorf(\"%s.%s %s: %%w\", err)\n\t\t}\n", i, asFunc[p.kind], i, n, m.name, p.name)
			a := fmt.Sprintf("a%d", i)
			switch p.typ {
			case "int64", "float64", "string", "[]byte", "bool":
			default:
				a = p.typ + "(" + a + ")"
			}
			as = append(as, a)
		}
		w("\t\tx.obj.%s(%s)\n\t\treturn nil\n", m.name, strings.Join(as, ", "))
	}
	w("\t}\n\treturn fmt.Errorf(\"%s has no update method %%q\", method)\n}\n\n", n)
}

func emitService(w func(string, ...any), s string, fields [][2]string, ms []svcMethod) {
	w("// %sObjects lists the state objects of %s for mapping validation.\nvar %sObjects = []durability.ObjectInfo{", s, s, s)
	for i, f := range fields {
		if i > 0 {
			w(", ")
		}
		w("%sInfo", f[1])
	}
	w("}\n\n")
	w("// NewOriginal%s builds %s on the bare state objects (the seed's original\n// service: no proxies).\nfunc NewOriginal%s() *%s {\n\treturn &%s{", s, s, s, s, s)
	for i, f := range fields {
		if i > 0 {
			w(", ")
		}
		w("%s: new(%s)", f[0], f[1])
	}
	w("}\n}\n\n")
	w("// NewDurable%s builds %s with every state object behind the proxy m\n// chooses, and the set of proxies the runtime drives.\n", s, s)
	w("func NewDurable%s(m *durability.Mapping) (*Durable%s, error) {\n", s, s)
	w("\tif err := m.Validate(%sObjects); err != nil {\n\t\treturn nil, err\n\t}\n", s)
	w("\tsvc := &%s{}\n\tvar ps []durability.Proxy\n", s)
	for _, f := range fields {
		w("\t{\n\t\tp, err := New%sProxy(new(%s), m.Objects[%q])\n\t\tif err != nil {\n\t\t\treturn nil, err\n\t\t}\n", f[1], f[1], f[1])
		w("\t\tsvc.%s = p\n\t\tps = append(ps, p.Durability())\n\t}\n", f[0])
	}
	w("\treturn &Durable%s{Service: svc, Set: durability.NewSet(ps...)}, nil\n}\n\n", s)
	w("// Durable%s is %s rewired by the durability compiler: each method\n// is bracketed by startA and commitA on every proxy and returns, beside\n// its results, the work the mechanisms need (statements, shipped updates).\n", s, s)
	w("type Durable%s struct {\n\tService *%s\n\tSet     *durability.Set\n}\n\n", s, s)
	for _, m := range ms {
		var rs, vs []string
		for i, r := range m.results {
			rs = append(rs, r)
			vs = append(vs, fmt.Sprintf("r%d", i))
		}
		rs = append(rs, "durability.Work", "error")
		w("// %s calls %s.%s as one atomic action (startA ... commitA).\n", m.name, s, m.name)
		w("func (d *Durable%s) %s(%s) (%s) {\n\td.Set.StartA()\n", s, m.name, m.params, strings.Join(rs, ", "))
		if len(vs) > 0 {
			w("\t%s := d.Service.%s(%s)\n", strings.Join(vs, ", "), m.name, m.args)
		} else {
			w("\td.Service.%s(%s)\n", m.name, m.args)
		}
		w("\tw, err := d.Set.CommitA()\n\treturn %s\n}\n\n", strings.Join(append(vs, "w", "err"), ", "))
	}
}

// Stale reports whether Dir/Output differs from what Generate returns.
func Stale(o Options) (bool, error) {
	src, err := Generate(o)
	if err != nil {
		return false, err
	}
	if o.Output == "" {
		o.Output = DefaultOutput
	}
	cur, err := os.ReadFile(filepath.Join(o.Dir, o.Output))
	if err != nil {
		return true, nil
	}
	return !bytes.Equal(cur, src), nil
}
