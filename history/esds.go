package history

// SetESDS records an operation's ESDS request options (seed 000): its id, the
// ids it must follow, and whether it is strict. Call it before completing p.
func (p *Pending) SetESDS(id string, prev []string, strict bool) {
	p.op.ID = id
	p.op.Prev = append([]string(nil), prev...)
	p.op.Strict = strict
}
