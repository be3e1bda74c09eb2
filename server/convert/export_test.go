package convert

// Request is request, for the tests' round trips (Input of Request is the
// input again); only tests build requests from engine inputs.
var Request = request
