// Package doccheck checks the project's Markdown: every relative link
// points to a file of the repository, every #anchor to a heading (or an
// explicit <a id>) of the page it names, every page under docs/ is
// reachable from docs/README.md, and no page speaks of how the project is
// developed (tracker numbers, work sittings). Its test runs over
// README.md, CONTRIBUTING.md, CHANGELOG.md and docs/**/*.md.
//
// It also checks that the code's maps cannot drift: each package's doc.go
// lists every one of its files once, and no file that is not there, and
// docs/architecture.md's code map names every package go list finds.
//
// Files:
//
//	doc.go       this comment
//	check.go     Check: the links, anchors, reachability and wording of pages
//	markdown.go  Parse: a page's headings, anchors, links and prose lines
//	filemap.go   ParseFileMap, CheckFileMaps, CheckCodeMap: doc.go file maps and the architecture page's code map
package doccheck
