// Package storagev1 holds the storage-only messages Setpoint's store writes
// to disk (setpoint.storage.v1), generated from storage.proto by buf. They
// are not part of the gRPC API; store/doc.go describes the layout.
package storagev1
