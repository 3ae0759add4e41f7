package manifest_test

import (
	"fmt"

	"github.com/jetplane/jetplane/schemas/manifest"
)

func ExampleDecode() {
	objs, err := manifest.Decode("web.yaml", []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  dependsOn:
    - {kind: Service, name: db}
spec:
  replicas: 3
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objs {
		fmt.Println(manifest.KeyString(manifest.KeyOf(o)), "depends on", manifest.KeyString(o.Metadata.DependsOn[0]))
	}
	// Output: Deployment.apps/shop/web depends on Service/shop/db
}

func ExampleDecode_errors() {
	_, err := manifest.Decode("deploy.yaml", []byte(`apiVersion: v1
kind: Service
metadata:
  name: db
---
apiVersion: apps/v1
kind: deployment
metadata:
  name: Foo_Bar
`))
	fmt.Println(err)
	// Output:
	// deploy.yaml, document 2: kind: "deployment" is not a valid kind: must start with an upper case letter and contain only letters and digits, such as Deployment
	// deploy.yaml, document 2: metadata.name: "Foo_Bar" is not a valid name: must be lower case alphanumeric characters, '-' or '.', start and end with an alphanumeric (DNS-1123 subdomain)
}

func ExampleFindCycle() {
	fmt.Println(manifest.FindCycle(map[string][]string{
		"Service/shop/web":         {"Deployment.apps/shop/api"},
		"Deployment.apps/shop/api": {"Service/shop/db"},
		"Service/shop/db":          {"Service/shop/web"},
	}))
	// Output: [Deployment.apps/shop/api Service/shop/db Service/shop/web Deployment.apps/shop/api]
}
