// Package report renders simulation results for people and for programs: a
// terminal comparison table (Table), a stable JSON summary (WriteJSON) and a
// self-contained offline HTML report with charts (WriteHTML). All three take
// the same []metrics.Result, one per (policy, seed), and compare policies on
// one input: figures are means over seeds.
//
// The package does no I/O of its own beyond the writer it is given, and its
// output depends only on its input: policies keep the order of their first
// result, seeds are sorted, and maps are walked in key order.
package report
