# npv_add_check_test(NAME name LABELS l... SOURCES f.c... [LIBS t...] [ENV K=V...] [TIMEOUT s]
#                    [GROUPS g...] [GROUPS_ONLY])
# One Check suite = one executable = one ctest test, labelled with its area.
#
# A test that cannot run here exits 77 (NPV_TEST_SKIP, tests/common/npv_test.h)
# and ctest shows it as skipped. GROUPS: case groups whose preconditions the
# host may lack; each becomes its own ctest test NAME_g, running "NAME g",
# so one missing precondition skips its group and not the whole suite.
# GROUPS_ONLY: no test runs the binary without a group argument.
pkg_check_modules(CHECK REQUIRED IMPORTED_TARGET check)

function(npv_add_check_test)
  cmake_parse_arguments(T "GROUPS_ONLY" "NAME;TIMEOUT" "LABELS;SOURCES;LIBS;ENV;GROUPS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_compile_options(${T_NAME} PRIVATE ${NPV_WARNINGS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  target_link_libraries(${T_NAME} PRIVATE npuvfio_internal PkgConfig::CHECK ${T_LIBS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set(tests)
  if(NOT T_GROUPS_ONLY)
    set(tests ${T_NAME})
    add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  endif()
  foreach(g ${T_GROUPS})
    add_test(NAME ${T_NAME}_${g} COMMAND ${T_NAME} ${g})
    list(APPEND tests ${T_NAME}_${g})
  endforeach()
  # CK_FORK=yes: a crashing test case fails alone; Check's default timeout is ours to set.
  set_tests_properties(${tests} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
                       ENVIRONMENT "CK_DEFAULT_TIMEOUT=${T_TIMEOUT};${T_ENV}"
                       SKIP_RETURN_CODE 77)
endfunction()
