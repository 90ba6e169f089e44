module github.com/degraded/degraded/client

go 1.26.0

toolchain go1.26.10
