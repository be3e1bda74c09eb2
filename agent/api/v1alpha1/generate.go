package v1alpha1

// The CRD manifest in deploy/ is generated from the types in this package.
//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 crd paths=. output:crd:dir=../../../deploy
//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=.
