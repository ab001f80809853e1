package suppression

// LuaEpochMs is the script's time reader, for checking ParseTime against it.
const LuaEpochMs = luaEpochMs

// LuaISOMs is the script's time writer, for checking it against FormatTime.
const LuaISOMs = luaISOMs
