// Package demand reads, writes, generates and records demand traces: how
// much memory (and optionally how many GPUs and how much IO bandwidth) each
// consumer used over time, sampled at a constant interval. They are the
// input of predictive provisioning (P0 §8: forecast each consumer's demand
// and provision ahead of need) and of its offline evaluation.
//
// A trace is a CSV file (see Read for the exact rules, docs/provisioning.md
// for examples):
//
//	time_s,entity,memory_gib[,gpus][,io_mbps]
//	0,worker-0,1.5
//	0,worker-1,2
//	5,worker-0,1.75
//	...
//
// In memory a Trace is one Series per entity on a shared time grid: sample i
// of a series is at Start + i×Interval. Read checks everything a consumer
// would otherwise have to (time order, gaps, duplicates, negative or
// non-finite values) and names the file, line and column of the first
// problem; Write writes a trace that Read gives back exactly.
//
// Three generators make synthetic traces, deterministic by seed: Giraph
// (P0 §9's TopKPageRank observation, per-node peak:average 2.78:1 and
// aggregate 1.68:1), Diurnal (a daily cycle) and Bursty (a base level with
// bursts). Record runs a command and samples the resident memory of its
// whole process tree (Linux only).
package demand
