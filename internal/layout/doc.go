// Package layout holds the tests that keep the repository's layout as
// STYLE.md describes it: every package has a doc comment, and that comment
// is whole — no paragraph of a package's manual is cut off from it by a
// blank line, which would hide it from go doc — and imports point inward
// (the target package knows only the engine; the API conversion knows
// nothing of the store).
package layout
