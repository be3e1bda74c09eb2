// Package console is the web console: its assets (HTML, JavaScript, CSS),
// embedded in the binary so the console works offline — plain files,
// written by hand: there is no build step, and nothing is fetched from
// elsewhere at run time — and the JSON endpoints they read (Handler).
// The endpoints reach the service only as gRPC calls through the server's
// door (package door), as the browser, so each passes the server's whole
// admission; the console imports nothing of the server.
package console

import "embed"

// Assets are the console's files, under assets/.
//
//go:embed assets
var Assets embed.FS
