// Package redisscripts carries spec/redis's Lua scripts inside the module. go:embed cannot reach outside the
// module's directory, and a published module must not read a checkout's spec/ at run time, so `go generate`
// copies the files here byte for byte and a test (scripts_test.go) fails whenever the copies differ from
// spec/redis: the spec stays the one source, and the module works wherever it is installed.
package redisscripts

import _ "embed"

//go:generate sh -c "cp ../../../../spec/redis/delete_if.lua ../../../../spec/redis/incr.lua ../../../../spec/redis/tag.lua ."

// DeleteIf is spec/redis/delete_if.lua.
//
//go:embed delete_if.lua
var DeleteIf string

// Incr is spec/redis/incr.lua.
//
//go:embed incr.lua
var Incr string

// Tag is spec/redis/tag.lua.
//
//go:embed tag.lua
var Tag string
