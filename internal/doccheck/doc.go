// Package doccheck checks the project's Markdown: every relative link
// points to a file of the repository, every #anchor to a heading (or an
// explicit <a id>) of the page it names, every page under docs/ is
// reachable from docs/README.md, and no page speaks of how the project is
// developed (tracker numbers, work sittings). Its test runs over
// README.md, CONTRIBUTING.md, CHANGELOG.md and docs/**/*.md.
package doccheck
