module tubemqaio/benchpeer

go 1.21

require github.com/apache/inlong/inlong-tubemq/tubemq-client-twins/tubemq-client-go v0.0.0-20241206111749-1183e43b4425

require (
	github.com/golang/protobuf v1.5.0 // indirect
	go.uber.org/atomic v1.6.0 // indirect
	go.uber.org/multierr v1.5.0 // indirect
	go.uber.org/zap v1.16.0 // indirect
	google.golang.org/protobuf v1.34.1 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.0.0 // indirect
)
