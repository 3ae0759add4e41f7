package projections

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

func nowProto() *timestamppb.Timestamp { return timestamppb.New(time.Now()) }
