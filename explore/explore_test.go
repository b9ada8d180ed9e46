package explore

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/synod-dev/synod/mc"
	_ "github.com/synod-dev/synod/protocol/all"
)

// serve starts the explorer on a loopback port for t.
func serve(t *testing.T, tr *mc.Trace) string {
	t.Helper()
	s, err := New(tr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return "http://" + ln.Addr().String()
}

func counterexample(t *testing.T) *mc.Trace {
	t.Helper()
	r, err := mc.Check(mc.NewConfig("abd-broken-nowriterid"))
	if err != nil || r.Violation == nil {
		t.Fatalf("no counterexample: %v", err)
	}
	return r.Violation
}

func getView(t *testing.T, method, url string) mc.View {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v mc.View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAPI: the state API steps through a counterexample and by hand.
func TestAPI(t *testing.T) {
	tr := counterexample(t)
	base := serve(t, tr)
	v := getView(t, "GET", base+"/api/state")
	if v.Pos != 0 || v.Verdict != "ok" || len(v.Nodes) != 3 || len(v.Enabled) == 0 {
		t.Fatalf("initial view: pos %d verdict %q nodes %d enabled %d", v.Pos, v.Verdict, len(v.Nodes), len(v.Enabled))
	}
	v = getView(t, "POST", base+"/api/goto?pos=1000")
	if v.Pos != len(tr.Events) || !strings.Contains(v.Verdict, "store-held") {
		t.Fatalf("end of the counterexample: pos %d of %d, verdict %q", v.Pos, len(tr.Events), v.Verdict)
	}
	v = getView(t, "POST", base+"/api/goto?pos=1")
	if len(v.History) != 1 || !strings.Contains(v.History[0], "client 1 -> set x") {
		t.Fatalf("after one step the history is %q", v.History)
	}
}

// TestBrowser drives the page in headless Chromium: step through a
// counterexample forward and back, and take an event by hand.
func TestBrowser(t *testing.T) {
	bin := ""
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(b); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium binary found (apt-get install -y chromium): the headless-browser test is skipped")
	}
	tr := counterexample(t)
	base := serve(t, tr)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("headless", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel2 := chromedp.NewContext(actx)
	defer cancel2()
	ctx, cancel3 := context.WithTimeout(ctx, 60*time.Second)
	defer cancel3()

	text := func(sel string) string {
		var s string
		if err := chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery)); err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	waitPos := func(n string) {
		if err := chromedp.Run(ctx, chromedp.Poll(`document.getElementById('pos').textContent==='`+n+`'`, nil)); err != nil {
			t.Fatalf("waiting for step %s: %v", n, err)
		}
	}
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitPos("0")
	if got := text("#verdict"); got != "ok" {
		t.Errorf("initial verdict %q", got)
	}
	if got := text("#protocol"); got != "abd-broken-nowriterid" {
		t.Errorf("protocol %q", got)
	}
	// Forward one step: client 1's request reaches n1, which queries.
	if err := chromedp.Run(ctx, chromedp.Click("#fwd", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitPos("1")
	if got := text("#history"); !strings.Contains(got, "client 1 -> set x") {
		t.Errorf("history after step 1: %q", got)
	}
	if got := text("#flight"); !strings.Contains(got, "n1 -> n2: query") {
		t.Errorf("messages in flight after step 1: %q", got)
	}
	if got := text("#node-n1 .state"); !strings.Contains(got, "1 operations in flight") {
		t.Errorf("n1's state after step 1: %q", got)
	}
	// To the end: the violation is shown.
	if err := chromedp.Run(ctx, chromedp.Click("#end", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitPos(itoa(len(tr.Events)))
	if got := text("#verdict"); !strings.Contains(got, "store-held") {
		t.Errorf("verdict at the end: %q", got)
	}
	// Back one step: the violation is gone.
	if err := chromedp.Run(ctx, chromedp.Click("#back", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitPos(itoa(len(tr.Events) - 1))
	if got := text("#verdict"); got != "ok" {
		t.Errorf("verdict one step before the end: %q", got)
	}
	// By hand: take the first enabled event (the path is cut there).
	first := text("#enabled li:first-child")
	if err := chromedp.Run(ctx, chromedp.Click("#enabled a.ev", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitPos(itoa(len(tr.Events)))
	if got := text("#path li.cur"); got != first {
		t.Errorf("chose %q, the path's last event is %q", first, got)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
