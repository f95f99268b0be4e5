module github.com/catena-cni/catena

go 1.26.8

require (
	github.com/containernetworking/cni v1.3.1
	github.com/spf13/afero v1.15.0
	github.com/stretchr/testify v1.11.1
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.49.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/onsi/ginkgo/v2 v2.25.1 // indirect
	github.com/onsi/gomega v1.38.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	go.opentelemetry.io/otel v1.29.0 // indirect
	go.opentelemetry.io/otel/trace v1.29.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
