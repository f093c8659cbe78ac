-- scripts/docs-html.lua OUT.html PAGE.md...: the reference in docs/ as one
-- static HTML page (make docs). It knows the Markdown the pages use:
-- headings, paragraphs, fenced code, tables, "-" lists, `code`, **bold**,
-- *emphasis* and [links](page.md), which become anchors in the one page.
local out_path = arg[1]
if not out_path or not arg[2] then
  io.stderr:write("usage: luajit scripts/docs-html.lua OUT.html PAGE.md...\n")
  os.exit(2)
end

local function esc(s)
  return (s:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"))
end

-- "docs/from-lua.md" -> "from-lua"
local function page_id(path)
  return (path:match("([^/]+)%.md$") or path)
end

local function slug(page, text)
  return page .. "-" .. text:lower():gsub("`", ""):gsub("[^%w]+", "-"):gsub("^-+", ""):gsub("-+$", "")
end

-- Inline Markdown: code spans first (their text stays literal), then
-- links and bold in the rest.
local function inline(s)
  local parts = {}
  local pos = 1
  while true do
    local a, b = s:find("`[^`]+`", pos)
    local text = s:sub(pos, (a or 0) - 1)
    if not a then text = s:sub(pos) end
    text = esc(text)
    text = text:gsub("%*%*(.-)%*%*", "<strong>%1</strong>")
    text = text:gsub("%*([^%*%s][^%*]-)%*", "<em>%1</em>")
    text = text:gsub("%[([^%]]+)%]%(([^%)]+)%)", function(label, href)
      local page = href:match("^([%w%-]+)%.md$")
      return string.format('<a href="%s">%s</a>', page and "#" .. page or esc(href), label)
    end)
    parts[#parts + 1] = text
    if not a then break end
    parts[#parts + 1] = "<code>" .. esc(s:sub(a + 1, b - 1)) .. "</code>"
    pos = b + 1
  end
  return table.concat(parts)
end

-- A table row's cells ("| a | b |"), where "\|" is a literal bar.
local function cells(line)
  line = line:gsub("\\|", "\1"):gsub("^%s*|", ""):gsub("|%s*$", "")
  local out = {}
  for c in (line .. "|"):gmatch("(.-)|") do
    out[#out + 1] = inline((c:gsub("\1", "|"):match("^%s*(.-)%s*$")))
  end
  return out
end

local function render(path, toc)
  local f = assert(io.open(path, "rb"))
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  local page = page_id(path)
  local html = { string.format('<section id="%s">', page) }
  local function emit(s) html[#html + 1] = s end
  local i, para = 1, {}
  local function flush()
    if #para > 0 then emit("<p>" .. inline(table.concat(para, " ")) .. "</p>") end
    para = {}
  end
  while i <= #lines do
    local l = lines[i]
    local hashes, title = l:match("^(#+)%s+(.*)$")
    if l:match("^```") then
      flush()
      local lang = l:match("^```(%w+)")
      local code = {}
      i = i + 1
      while i <= #lines and not lines[i]:match("^```") do
        code[#code + 1] = esc(lines[i])
        i = i + 1
      end
      emit(string.format('<pre%s><code>%s</code></pre>', lang and ' class="' .. lang .. '"' or "",
                         table.concat(code, "\n")))
    elseif hashes then
      flush()
      local n = #hashes
      local id = n == 1 and page .. "-top" or slug(page, title)
      emit(string.format('<h%d id="%s">%s</h%d>', n, id, inline(title), n))
      if n <= 2 then toc[#toc + 1] = { level = n, id = n == 1 and page or id, title = title } end
    elseif l:match("^%s*|") then
      flush()
      local head = cells(l)
      if table.concat(head) == "" then -- "| | |": a table without a header row
        emit("<table><tbody>")
      else
        emit("<table><thead><tr><th>" .. table.concat(head, "</th><th>") .. "</th></tr></thead><tbody>")
      end
      i = i + 1 -- the |---| line
      while i + 1 <= #lines and lines[i + 1]:match("^%s*|") do
        i = i + 1
        emit("<tr><td>" .. table.concat(cells(lines[i]), "</td><td>") .. "</td></tr>")
      end
      emit("</tbody></table>")
    elseif l:match("^%- ") then
      flush()
      emit("<ul>")
      while i <= #lines and lines[i]:match("^%- ") do
        local item = { (lines[i]:gsub("^%- ", "")) }
        while i + 1 <= #lines and lines[i + 1]:match("^  %S") do
          i = i + 1
          item[#item + 1] = lines[i]:match("^%s*(.*)$")
        end
        emit("<li>" .. inline(table.concat(item, " ")) .. "</li>")
        i = i + 1
      end
      emit("</ul>")
      i = i - 1
    elseif l:match("^%s*$") then
      flush()
    else
      para[#para + 1] = l
    end
    i = i + 1
  end
  flush()
  emit("</section>")
  return table.concat(html, "\n")
end

local toc, sections = {}, {}
for k = 2, #arg do sections[#sections + 1] = render(arg[k], toc) end

local nav = { "<nav><ul>" }
for _, e in ipairs(toc) do
  if e.level == 1 then
    nav[#nav + 1] = string.format('<li class="page"><a href="#%s">%s</a></li>', e.id, inline(e.title))
  end
end
nav[#nav + 1] = "</ul></nav>"

local css = [[
body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: #1d1f21; }
nav { position: fixed; top: 0; left: 0; bottom: 0; width: 14em; overflow: auto;
      background: #f4f5f7; border-right: 1px solid #dde; padding: 1em 0; }
nav ul { list-style: none; margin: 0; padding: 0 1em; }
nav li { margin: 0.3em 0; }
nav a { color: #234; text-decoration: none; }
main { margin-left: 16em; max-width: 52em; padding: 1em 2em 4em; }
section { border-bottom: 1px solid #dde; padding-bottom: 1.5em; }
h1 { font-size: 1.8em; margin-top: 1.2em; } h2 { font-size: 1.3em; margin-top: 1.4em; }
code { font: 13px/1.4 ui-monospace, monospace; background: #f0f1f4; padding: 0 0.2em; }
pre { background: #f6f7f9; border: 1px solid #e2e4e8; padding: 0.7em 1em; overflow: auto; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #d8dbe0; padding: 0.3em 0.6em; vertical-align: top; text-align: left; }
th { background: #eef0f3; }
]]

local out = assert(io.open(out_path, "wb"))
out:write('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n',
          "<title>weft reference</title>\n<style>\n", css, "</style></head>\n<body>\n",
          table.concat(nav, "\n"), "\n<main>\n", table.concat(sections, "\n"), "\n</main>\n</body></html>\n")
out:close()
print(string.format("docs: %d pages -> %s", #sections, out_path))
