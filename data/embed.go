// Package data ships the public traces corral's presets and benchmarks use,
// unchanged, with their licences (see README.md in this folder).
package data

import "embed"

// FS holds openb/, lingjun/ and philly/ exactly as published.
//
//go:embed openb/*.csv openb/LICENSE lingjun/topo.csv lingjun/LICENSE philly/philly_runtime.csv philly/LICENSE
var FS embed.FS
