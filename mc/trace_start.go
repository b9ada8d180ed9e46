package mc

// StartTrace starts a hand-driven trace in cfg (the explorer's "explore a
// protocol's model"), positioned where the model checker's search starts:
// after the model's scripted prefix (automaton.ModelConfig.Prefix;
// prefix.go), whose events the trace holds like any other so the user can
// step back through them. With no prefix it is NewTrace.
func StartTrace(cfg Config) (*Trace, error) {
	t := NewTrace(cfg)
	if len(cfg.Model.Prefix) == 0 {
		return t, nil
	}
	w, err := newWorld(&t.cfg)
	if err != nil {
		return nil, err
	}
	for i, want := range cfg.Model.Prefix {
		ev, err := w.applyPrefixEvent(i, want) // prefix.go
		if err != nil {
			return nil, err
		}
		t.Events = append(t.Events, ev)
	}
	t.Prefix = len(t.Events)
	return t, nil
}
