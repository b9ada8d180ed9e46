package counter

import "embed"

// Mappings are this service's durability mapping files (name.yaml), for
// experiments and tests that choose a configuration by name.
//
//go:embed *.yaml
var Mappings embed.FS
