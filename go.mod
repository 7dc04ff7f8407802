module github.com/overtime-hpc/overtime

go 1.26.8

require (
	github.com/Azure/go-ntlmssp v0.1.1 // indirect
	github.com/getkin/kin-openapi v0.152.0 // indirect
	github.com/go-asn1-ber/asn1-ber v1.5.8 // indirect
	github.com/go-ldap/ldap/v3 v3.4.15 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
