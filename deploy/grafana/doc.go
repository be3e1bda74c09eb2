// Package grafana holds Setpoint's Grafana dashboard (setpoint.json) and
// the test that every metric it queries is one the server or the agent
// exports.
package grafana
