// Package layering holds no code: its test checks the import rules that keep
// corral's engine pure and its policies apart (docs/architecture.md, "Layers").
package layering
