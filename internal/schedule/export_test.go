package schedule

// BulkExplain turns countClosed on and off, for a test that compares both.
var BulkExplain = &bulkExplain
