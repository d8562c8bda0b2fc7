package odata

import (
	"fmt"
	"net/http"

	"rackpool/internal/rf"
)

// Query problems, with the Base registry's arguments and severities.

// errUnsupported: a $-parameter the service does not implement.
func errUnsupported(param string) *rf.Problem {
	p := rf.New(http.StatusNotImplemented, rf.Registry+"QueryNotSupported",
		"Querying is not supported by the implementation.")
	p.Severity = "Warning"
	return p.Resolve(fmt.Sprintf("The query parameter %s is not supported; remove it and resubmit the request. Supported: $select, $expand, $filter, $top, $skip, only.", param))
}

// errFormat: a value the parameter cannot take.
func errFormat(value, param string) *rf.Problem {
	p := rf.New(http.StatusBadRequest, rf.Registry+"QueryParameterValueFormatError",
		fmt.Sprintf("The value '%s' for the parameter %s is not a format that the parameter can accept.", value, param), value, param)
	p.Severity = "Warning"
	return p
}

// errRange: a value outside what the parameter accepts (valid).
func errRange(value, param, valid string) *rf.Problem {
	p := rf.New(http.StatusBadRequest, rf.Registry+"QueryParameterOutOfRange",
		fmt.Sprintf("The value '%s' for the query parameter %s is out of range %s.", value, param, valid), value, param, valid)
	p.Severity = "Warning"
	return p
}

// NotOnResource refuses a query parameter the resource cannot take; why
// is the resolution.
func NotOnResource(why string) *rf.Problem {
	p := rf.New(http.StatusBadRequest, rf.Registry+"QueryNotSupportedOnResource",
		"Querying is not supported on the requested resource.")
	p.Severity = "Warning"
	return p.Resolve(why)
}

// Combination refuses query parameters that cannot be used together; why
// is the resolution.
func Combination(why string) *rf.Problem {
	p := rf.New(http.StatusBadRequest, rf.Registry+"QueryCombinationInvalid",
		"Two or more query parameters in the request cannot be used together.")
	p.Severity = "Warning"
	return p.Resolve(why)
}

// Invalid is a 400 for a query parameter's value the service does not
// accept; resolution says what it does.
func Invalid(param, resolution string) *rf.Problem {
	return rf.New(http.StatusBadRequest, rf.Registry+"QueryParameterValueError",
		fmt.Sprintf("The value for the parameter %s is invalid.", param), param).Resolve(resolution)
}
