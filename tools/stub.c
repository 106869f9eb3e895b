/* keeps fkv_tools non-empty before the simulator lands */
typedef int fkv__tools_stub;
