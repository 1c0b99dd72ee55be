// krew, for the release test: it installs the plugin from the krew manifest
// `./dev release` writes. Bump the version, then run
// `go get sigs.k8s.io/krew@<version>` here and commit go.mod and go.sum.
module bootc-operator.test/control-plane/krew

go 1.26.0

require sigs.k8s.io/krew v0.4.3 // indirect
