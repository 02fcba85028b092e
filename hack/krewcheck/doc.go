// Package krewcheck proves a release installs with krew: its test builds a
// snapshot release with hack/release-snapshot.sh (goreleaser, built from the
// Go module proxy), validates the krew manifest rendered from the archives
// with krew's own validator (krew-index's validate-krew-manifest), and
// installs every platform's archive with a real krew into temporary
// KREW_ROOTs. Both krew tools are built from the Go module proxy by this
// module, so that krew's dependencies stay out of the plugin's go.mod.
//
// Run it with `make release-test`; it takes minutes, so `make test` leaves it out.
package krewcheck
