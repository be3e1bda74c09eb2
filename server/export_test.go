package server

import "google.golang.org/grpc"

// ServiceInfo returns the services the server registers, as its gRPC
// server describes them.
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo {
	ss := serviceSet{}
	s.register(ss)
	return ss
}
