// Package schema1 holds the records that catena 1daa3b7, the last build
// that wrote only schema-1 records (full snapshots, appended with
// fdatasync), left on a node in each phase a node can be upgraded in, and
// copies them into a cache dir for the tests that upgrade such a node.
// scripts/make-schema1-testdata.sh made them (testdata/README.txt); the
// names and paths below are those it used, which the records cache.
//
// Files:
//
//	doc.go      this comment
//	schema1.go  Attachments, Copy and the paths: the old records embedded from testdata/ and copied into a cache dir
//	testdata/   the records and pending markers, as scripts/make-schema1-testdata.sh made them
package schema1
