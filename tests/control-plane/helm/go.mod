// helm, for the chart tests and `./dev release`. Bump the version, then run
// `go get helm.sh/helm/v3@<version>` here and commit go.mod and go.sum.
module bootc-operator.test/control-plane/helm

go 1.26.0

require helm.sh/helm/v3 v3.22.0 // indirect
