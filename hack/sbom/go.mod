// Module sbom writes the SPDX software bill of materials of `make release`
// from the build information the Go toolchain embeds in each binary. It has
// no dependencies and is kept apart so the main module's stay evictd's own.
module github.com/evictd/evictd/hack/sbom

go 1.25.0
