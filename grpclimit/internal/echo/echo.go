// Package echo is a gRPC service written by hand (no generated code) for
// grpclimit's tests and demo: demo.Echo with a unary Say and a
// bidirectional Chat, both on google.protobuf.StringValue.
package echo

import (
	"context"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The full method names.
const (
	Say  = "/demo.Echo/Say"
	Chat = "/demo.Echo/Chat"
)

// Register registers the service on s: Say answers its message, Chat
// answers every message it receives until the client closes its side.
func Register(s grpc.ServiceRegistrar) {
	s.RegisterService(&desc, struct{}{})
}

var desc = grpc.ServiceDesc{
	ServiceName: "demo.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Say",
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			say := func(_ context.Context, req any) (any, error) { return req, nil }
			if icpt == nil {
				return say(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: Say}, say)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		Handler:       chat,
		ServerStreams: true,
		ClientStreams: true,
	}},
}

// ChatDesc is Chat's stream description, for ClientConn.NewStream.
var ChatDesc = &desc.Streams[0]

func chat(_ any, ss grpc.ServerStream) error {
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(in); err != nil {
			return err
		}
	}
}

// CallSay calls Say with msg on cc.
func CallSay(ctx context.Context, cc grpc.ClientConnInterface, msg string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, Say, wrapperspb.String(msg), out, opts...)
	return out.GetValue(), err
}
