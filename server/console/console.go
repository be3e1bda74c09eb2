// Package console holds the web console's assets (HTML, JavaScript, CSS),
// embedded in the binary so the console works offline. They are plain
// files, written by hand: there is no build step, and nothing is fetched
// from elsewhere at run time. The server package serves them with the JSON
// endpoints they read (server.Server.ConsoleHandler).
package console

import "embed"

// Assets are the console's files, under assets/.
//
//go:embed assets
var Assets embed.FS
