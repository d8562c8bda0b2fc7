package schedule

// BulkExplain turns countClosed on and off, for a test that compares both.
var BulkExplain = &bulkExplain

// PruneByMemory turns the fit index's memory bound on and off.
var PruneByMemory = &pruneByMemory
