module github.com/convo-dev/convo/clients/go

go 1.21
