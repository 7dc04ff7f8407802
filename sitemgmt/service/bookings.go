package service

// Bookings books, changes and cancels weekly rules and exceptions, recording who owns
// each booking.
type Bookings struct{ s *Service }
