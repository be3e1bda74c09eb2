package etcdstore

// EtcdRevision exports etcdRevision to the tests.
var EtcdRevision = etcdRevision
