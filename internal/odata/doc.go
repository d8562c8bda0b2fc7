// Package odata applies the Redfish query parameters (DSP0266 §7.3) to a
// JSON resource: only, $filter, $skip and $top, $expand and $select.
//
// It knows nothing of routes or handlers. The service parses the query of
// a GET or HEAD before routing (Parse), so an unsupported or malformed one
// is refused before any handler runs; when the handler has answered 200,
// the service decodes the body and shapes it, in the order DSP0266
// prescribes:
//
//	only          a collection of exactly one member answers with that
//	              member (Query.Resolve)
//	ETag, 304     the service's: a query with $expand or $filter is never
//	              answered 304 (Query.Cacheable)
//	$filter       the Members that match (filter.go); Members@odata.count
//	              is their number
//	$skip, $top   a page of Members; Members@odata.count stays the total,
//	              Members@odata.nextLink addresses the next page
//	$expand       . subordinate references (not under Links), ~ those under
//	              Links, * both; ($levels=N), N ≤ MaxExpandLevels, default 1
//	$select       Prop, Sub/Prop, Members/Prop; @odata.id, type, etag and
//	              context always stay
//
// The last four are Query.Apply. A collection (a handler's Collection, or
// a map with a Members array of references) is shaped by
// Query.ShapeCollection instead, which pages before it renders anything
// (collection.go): only the page's members are read, at most MaxPage of
// them and 8 MiB inlined, and an index the collection offers answers
// $filter comparisons without reading members.
//
// Resources other than the body are read through a Fetch the service
// gives: a GET as the client of the request being answered, so the same
// authentication and authorisation decide what a client sees inline as
// what it may GET. A reference the client may not read, or that does not
// exist, stays a plain reference; each resource is fetched at most once
// per response, at most maxExpandBytes are inlined (a collection's page
// ends early there, with a nextLink), and the first 401
// stops the fetching (bad credentials are then not tried again and again,
// which would count towards account lockout). $filter reads every member
// it tests the same way, so a member the client may not read is left out.
//
// Every other $-parameter ($orderby, $count, ...) is 501
// QueryNotSupported; a value a supported one cannot take is 400; both are
// Base registry problems (rf.Problem). Parameters without $ are ignored,
// as DSP0266 requires.
package odata
