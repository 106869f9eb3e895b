/* An empty unit of fkv_tools (its sources are globbed by folder; this one
 * keeps the target valid whatever the folders hold). */
typedef int fkv__tools_stub;
