package sqlstore

// MaxPrepared is the bound on the statements a store keeps.
const MaxPrepared = maxPrepared
