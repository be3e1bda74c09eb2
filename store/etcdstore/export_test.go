package etcdstore

// EtcdRevision exports etcdRevision to the tests.
var EtcdRevision = etcdRevision

// FeedMember is the endpoint the store's feed watch is on now.
func FeedMember(s *Store) string { v, _ := s.feedOn.Load().(string); return v }
