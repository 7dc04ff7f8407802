package service

// Hosts answers what a host gets: its boot answer and its agent's configuration.
type Hosts struct{ s *Service }
