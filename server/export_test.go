package server

import "google.golang.org/grpc"

// ServiceInfo returns the services of the running gRPC server.
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }
