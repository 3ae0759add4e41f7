package scheduler

import (
	"fmt"
	"strings"
)

// Code is a plugin's verdict, as in the Kubernetes scheduling framework.
type Code int

// Codes a plugin returns.
const (
	// Success: the node passes (or the step went well).
	Success Code = iota
	// Error: the plugin failed; the cycle fails and the pod is retried.
	Error
	// Unschedulable: the node does not fit now, but a change may help.
	Unschedulable
	// UnschedulableAndUnresolvable: the node cannot fit, whatever changes
	// on it (preemption would not help).
	UnschedulableAndUnresolvable
	// Wait: from Permit, the pod waits (until allowed, rejected or its
	// timeout) before it is bound.
	Wait
	// Skip: from PreFilter or PreScore, the plugin has nothing to do for
	// this pod and its Filter or Score is not called; from Bind, the next
	// binder decides.
	Skip
	// Pending: the pod cannot be placed until something outside the
	// scheduler happens; a node it is returned for is rejected.
	Pending
)

// The numbering is Kubernetes' (framework.Code), which the WebAssembly
// ABI passes through unchanged.

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait", "Skip", "Pending"}

func (c Code) String() string {
	if int(c) < len(codeNames) && c >= 0 {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Status is a plugin's answer. A nil *Status is Success.
type Status struct {
	Code    Code
	Reasons []string
	// Plugin names the plugin that answered; the framework fills it in.
	Plugin string
	Err    error
}

// NewStatus returns a status with code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{Code: code, Reasons: reasons}
}

// AsStatus wraps an error as an Error status.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{Code: Error, Reasons: []string{err.Error()}, Err: err}
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s == nil || s.Code == Success }

// IsSkip reports whether s is Skip.
func (s *Status) IsSkip() bool { return s != nil && s.Code == Skip }

// IsRejected reports whether s rejects a node (Unschedulable,
// UnschedulableAndUnresolvable or Pending), as kube-scheduler counts it.
func (s *Status) IsRejected() bool {
	return s != nil && (s.Code == Unschedulable || s.Code == UnschedulableAndUnresolvable || s.Code == Pending)
}

// IsWait reports whether s is Wait.
func (s *Status) IsWait() bool { return s != nil && s.Code == Wait }

// GetCode is s.Code, Success for nil.
func (s *Status) GetCode() Code {
	if s == nil {
		return Success
	}
	return s.Code
}

// Message joins the reasons.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Reasons, ", ")
}

func (s *Status) Error() string {
	if s == nil {
		return "Success"
	}
	msg := s.Message()
	if s.Plugin != "" {
		msg = s.Plugin + ": " + msg
	}
	return s.Code.String() + ": " + msg
}
