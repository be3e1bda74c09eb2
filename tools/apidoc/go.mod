// Module apidoc pins protoc-gen-doc, the local buf plugin that writes the API
// reference (docs/api/) from the comments in proto/. It is a separate module
// so that the root module does not depend on the plugin's templates and
// their libraries. `make generate` runs it through buf as
// `go -C tools/apidoc tool protoc-gen-doc`.
module github.com/setpointhq/setpoint/tools/apidoc

go 1.26.0

tool github.com/pseudomuto/protoc-gen-doc/cmd/protoc-gen-doc

require (
	github.com/Masterminds/semver v1.4.2 // indirect
	github.com/Masterminds/sprig v2.15.0+incompatible // indirect
	github.com/aokoli/goutils v1.0.1 // indirect
	github.com/envoyproxy/protoc-gen-validate v0.3.0-java // indirect
	github.com/gogo/protobuf v1.1.1 // indirect
	github.com/golang/protobuf v1.5.2 // indirect
	github.com/google/uuid v1.1.2 // indirect
	github.com/huandu/xstrings v1.0.0 // indirect
	github.com/imdario/mergo v0.3.4 // indirect
	github.com/mwitkow/go-proto-validators v0.0.0-20180403085117-0950a7990007 // indirect
	github.com/pseudomuto/protoc-gen-doc v1.5.1 // indirect
	github.com/pseudomuto/protokit v0.2.0 // indirect
	golang.org/x/crypto v0.0.0-20200622213623-75b288015ac9 // indirect
	google.golang.org/genproto v0.0.0-20210917145530-b395a37504d4 // indirect
	google.golang.org/protobuf v1.27.1 // indirect
)
