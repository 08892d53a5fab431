-- The start of every mark script (mark_set.lua, mark_get.lua,
-- mark_list.lua): the script's key, and the live helper. Like every script,
-- a mark script is linked (link.go) after prelude.lua's head and the helpers
-- it names: now_ms, and prelude.lua's live, which the live below shadows.

local KM = KEYS[1]
-- live reports whether score s (a ZSCORE reply, nil when absent) is after
-- now.
local function live(s, now)
  if not s then return false end
  if s == 'inf' or s == '+inf' then return true end
  return tonumber(s) > now
end
