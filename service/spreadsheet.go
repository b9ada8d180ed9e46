package service

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/wire"
)

func init() { Register(Spreadsheet{}) }

// Spreadsheet is the ESDS thesis's third demo application (§4.4, "Distributed
// Spreadsheets"): several users enter data into one shared workbook, whose
// replicas keep the current state and refresh each user's copy on demand.
// Cells are named "Sheet!A1" or "A1" (any non-empty name without newline
// or "="); values are strings.
//
//   - set CELL VALUE: writes the cell, returns OK (an empty value clears it).
//   - get CELL: the cell's value, or nil when empty.
//   - refresh: the whole workbook, one "CELL=VALUE" line per non-empty cell
//     in name order (the seed's refresh of a user's copy).
//
// Users entering disjoint cells never overwrite each other, whatever order
// the replicas settle on, which is the seed's use case for non-strict
// operations; a strict refresh sees the workbook as the eventual order has
// it.
type Spreadsheet struct{}

// Name implements Service.
func (Spreadsheet) Name() string { return "spreadsheet" }

// Validate implements Service.
func (Spreadsheet) Validate(op Op) error {
	switch op.Kind {
	case "refresh":
		return arity(op, 0)
	case "get":
		if err := arity(op, 0); err != nil {
			return err
		}
		return validCell(op.Key)
	case "set":
		if err := arity(op, 1); err != nil {
			return err
		}
		return validCell(op.Key)
	}
	return fmt.Errorf("unknown spreadsheet operation %q", op.Kind)
}

func validCell(c string) error {
	if c == "" || strings.ContainsAny(c, "=\n") {
		return fmt.Errorf("bad cell name %q", c)
	}
	return nil
}

// IsRead implements Service.
func (Spreadsheet) IsRead(op Op) bool { return op.Kind != "set" }

// NewState implements Service.
func (Spreadsheet) NewState() State { return &SpreadsheetState{Cells: map[string]string{}} }

// SpreadsheetState is one replica's workbook.
type SpreadsheetState struct {
	Cells map[string]string
}

// Apply implements State.
func (s *SpreadsheetState) Apply(op Op) Result {
	if err := (Spreadsheet{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	switch op.Kind {
	case "set":
		if len(op.Args[0]) == 0 {
			delete(s.Cells, op.Key)
		} else {
			s.Cells[op.Key] = string(op.Args[0])
		}
		return OK()
	case "get":
		v, ok := s.Cells[op.Key]
		if !ok {
			return Nil()
		}
		return Bytes([]byte(v))
	}
	var b strings.Builder
	for _, c := range s.names() {
		b.WriteString(c + "=" + s.Cells[c] + "\n")
	}
	return Bytes([]byte(b.String()))
}

func (s *SpreadsheetState) names() []string {
	ns := make([]string, 0, len(s.Cells))
	for c := range s.Cells {
		ns = append(ns, c)
	}
	sort.Strings(ns)
	return ns
}

// Snapshot implements State: the version byte, the cell count, then each
// cell's name and value in name order.
func (s *SpreadsheetState) Snapshot() []byte {
	e := wire.Encoder{B: []byte{snapVersion}}
	e.Uvarint(uint64(len(s.Cells)))
	for _, c := range s.names() {
		e.String(c)
		e.String(s.Cells[c])
	}
	return e.B
}

// Restore implements State.
func (s *SpreadsheetState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	if len(snap) == 0 || snap[0] != snapVersion {
		return fmt.Errorf("spreadsheet: bad snapshot version")
	}
	d.Byte()
	n := d.Count(1<<24, 2)
	cells := make(map[string]string, n)
	for i := 0; i < n; i++ {
		c := d.String()
		cells[c] = d.String()
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("spreadsheet: bad snapshot: %w", err)
	}
	s.Cells = cells
	return nil
}
