// kstatus-verdict prints what kstatus (sigs.k8s.io/cli-utils, the library
// Flux and Argo CD's health checks build on) says of each object: it reads
// a JSON array of objects on stdin and prints one line per object,
// "<name> <status>", status being InProgress, Current, Failed, Terminating
// or Unknown.
package main

import (
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	// apimachinery's json keeps integers int64, as the API server's do.
	var objects []map[string]interface{}
	data, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = json.Unmarshal(data, &objects)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading objects:", err)
		os.Exit(2)
	}
	for _, o := range objects {
		u := &unstructured.Unstructured{Object: o}
		res, err := status.Compute(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kstatus:", u.GetName(), err)
			os.Exit(1)
		}
		fmt.Printf("%s %s\n", u.GetName(), res.Status)
	}
}
